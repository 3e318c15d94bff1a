"""The gate: pure statistics and rules that turn trial records into a decision.

``exact`` (exact tests), ``regression`` (the per-case regression family), ``compare``
(paired arm comparison), ``budget`` (flip budgets), ``drift`` (baseline drift), ``stats``
(per-arm summaries), ``rules`` (the verdict rules), ``decide`` (combining them),
``policy`` (the promotion policy and its default) and ``opchar`` (operating
characteristics of a policy). Import from the modules; this package re-exports nothing.
"""
