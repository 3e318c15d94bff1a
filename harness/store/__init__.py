"""Where records live.

``records`` (the record models), ``store`` (the run store, one atomic writer) and
``baseline`` (promoted baselines); replaying a stored run is :mod:`harness.replay`, above
the store and the gateway. Import from the modules; this package re-exports nothing.
"""
