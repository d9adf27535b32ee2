"""jitbook: the code that the book *JIT with JAX* shows, runs and tests.

Importing it first sets an XLA flag that avoids a CPU miscompile (see
``jitbook.guard``); do ``import jitbook`` before any JAX computation.

Tools (used by every chapter) are re-exported here; each chapter's examples live in the
module named for the chapter's file (``chapters/tracing.qmd`` ->
``jitbook.chapters.tracing``).
"""

from jitbook.guard import apply_cpu_guard

apply_cpu_guard()

from jitbook import timing as timing  # noqa: E402
from jitbook.cache import capture_jax_logs as capture_jax_logs  # noqa: E402
from jitbook.cache import count_body_runs as count_body_runs  # noqa: E402
from jitbook.cache import count_compiles as count_compiles  # noqa: E402
from jitbook.display import show_source as show_source  # noqa: E402
from jitbook.display import table as table  # noqa: E402
from jitbook.display import versions as versions  # noqa: E402
from jitbook.errors import error_line as error_line  # noqa: E402
from jitbook.errors import error_of as error_of  # noqa: E402
from jitbook.errors import raised as raised  # noqa: E402
from jitbook.site.executed import executed_on as executed_on  # noqa: E402
from jitbook.size import pick as pick  # noqa: E402
