"""Running experiments: the matrix, the orchestrator and what a run keeps."""
