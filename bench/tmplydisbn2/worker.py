
import time
from frost_core.plugin_api import Done, Output, Plugin, WorkUnit

class Worker(Plugin):
    name = "worker"
    version = "1"
    def split(self, params):
        return []
    def start(self, unit):
        size = unit.data["bytes"]
        return {"i": 0, "n": unit.data["steps"], "blob": bytes(range(256)) * (size // 256), "acc": 0}
    def step(self, state):
        if state["i"] >= state["n"]:
            return Done({"cpu": time.process_time(), "acc": state["acc"]})
        acc = state["acc"]
        for k in range(20000):
            acc = (acc * 31 + k) % 1000003
        return {**state, "i": state["i"] + 1, "acc": acc}
    def progress(self, state):
        return state["i"] / state["n"]
    def combine(self, params, results):
        return Output(b"", "text/plain", "x.txt")

plugin = Worker()
