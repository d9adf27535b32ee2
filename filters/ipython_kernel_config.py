# The kernels Quarto starts for the book read this file (`make setup` copies it to .venv/etc/ipython/).
# ipykernel 7 logs "Kernel is running over TCP without encryption" at every start: Quarto's Jupyter engine
# connects over TCP on 127.0.0.1 and offers no setting for IPC or CurveZMQ keys, so each page of a build
# would print it. The harness quiets its kernels the same way (jitbook.site.harness.QUIET_KERNEL).
c = get_config()  # noqa: F821 (IPython provides it)
c.IPKernelApp.log_level = "ERROR"
