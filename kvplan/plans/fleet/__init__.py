"""The aggregated-serving fleet (kvplan plan), its instance and queueing model, and the workload summary."""
