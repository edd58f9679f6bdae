"""Evidence: plan normalization (method §6), the tools (§5) and the plan executor."""
