"""Cases and task sets as configuration: ``model`` (the case models), ``load`` (reading and
digesting cases) and ``lock`` (the task-set lock). Import from the modules.
"""
