"""The deployment: ports, placement, the plan of processes, start-up and readiness, preflight, the run assembly."""
