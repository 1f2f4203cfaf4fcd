"""The README's first agent, as source text the tests write into a file and run by PATH.py:NAME."""

PATIENT = '''
class Patient:
    """Ship once the processor reports the capture settled; escalate near the deadline (40 probes of 5 ticks run out first, at t=320: its card says so)."""
    name = "patient"
    def begin(self, brief):
        self.order = brief["order_id"]
    def act(self, obs):
        caps = (obs.get("result") or {}).get("captures", [])
        if any(c["status"] == "settled" for c in caps):
            return "ship", {"order_id": self.order}
        if obs["t"] > 590:
            return "escalate", {"order_id": self.order}
        return "probe_processor", {"order_id": self.order}
'''
