"""The fleet: which agents the service knows (registry), what their pools can serve
(admission), how big an elastic pool should be (scaling) and what the client VMs cost
(usage). Pure logic; the repositories and scalers are ports (core.ports, core.fleet.scaler).
"""
