"""One point's load: the load-generator seam, AIPerf as one generator, agentic traces, the measurement."""
