"""NeMo RL awareness: reading its configs, and the GPU layout they need."""
