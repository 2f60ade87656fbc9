"""tiny-rl: a miniature of NeMo RL."""
