"""Remote clusters over ssh (--remote NAME|HOST): the commands of a cluster's login node, run
from a laptop through the user's own ssh by the nrl-launch installed there. See forward.py."""
