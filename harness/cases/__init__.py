"""Cases and task sets as configuration: ``model`` (the case models), ``environment`` (the
declared Python environment of a case, the task set or an agent), ``load`` (reading and
digesting cases) and ``lock`` (the task-set lock). Import from the modules.
"""
