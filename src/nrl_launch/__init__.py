"""nrl-launch: launch multi-node Ray jobs for NeMo RL on Slurm from one typed job spec."""

__version__ = "0.1.0"
__all__ = ["__version__"]
