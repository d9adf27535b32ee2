"""Long work shows progress: a line whenever some seconds pass in silence."""

import threading
import time
from collections.abc import Callable


class Heartbeat:
    """A thread that calls ``say(seconds of silence)`` whenever ``every`` seconds pass
    without ``heard()``; use it as a context manager around the long work."""

    def __init__(self, every: float, say: Callable[[float], None]) -> None:
        self.every, self.say = every, say
        self.last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)

    def heard(self) -> None:
        """Something was said: the silence starts again."""
        self.last = time.monotonic()

    def _beat(self) -> None:
        said = self.last
        while not self._stop.wait(min(1.0, self.every)):
            now = time.monotonic()
            if now - max(self.last, said) >= self.every:
                self.say(now - self.last)
                said = now

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
