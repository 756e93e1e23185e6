"""Where the routers' CPU goes: perf samples, folded stacks, flame graphs, categories."""
