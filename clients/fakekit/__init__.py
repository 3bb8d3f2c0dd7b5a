"""What every fake server shares: ``fakeserver`` (serving and sessions), ``serveractions`` (what a
pure server protocol asks its shell to do), ``faults`` (injected faults), ``mediaclock`` (where a
fake stands on the timeline), ``replypacing`` (how replies are paced), ``behaviours`` (the
reference models: echo, neutral, silent, ...)."""
