"""One trial: from a spec to a verdict.

``spec`` (what a worker needs), ``execute`` (running a trial, turning exceptions into
verdicts), ``phases`` (agent and verifier phases), ``workspace`` (candidate trees),
``vtree`` (the verifier tree), ``runner_guard`` and ``junit`` (trusting the runner's
report), ``verify`` (verdicts from evidence), ``claims`` (agent claims against verdicts),
``excerpt`` (log excerpts) and ``validate`` (the red/green proof of a case). Import from
the modules; this package re-exports nothing.
"""
