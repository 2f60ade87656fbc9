"""`python -m nrl_launch` runs the CLI."""

from nrl_launch.cli import main

main()
