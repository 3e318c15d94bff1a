"""Where records live.

``records`` (the record models), ``store`` (the run store, one atomic writer),
``baseline`` (promoted baselines) and ``replay`` (re-verifying recorded candidates).
Import from the modules; this package re-exports nothing.
"""
