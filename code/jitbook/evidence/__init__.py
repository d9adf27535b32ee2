"""Evidence: what an answer shows, as plain data a grader can trust.

``collect`` runs in the student's kernel and turns requests (call the answer on these
inputs, export it at these shapes) into JSON and ``.npy`` bytes; ``read`` turns that
back into values and programs in the grader's process, with size limits and no
pickle. Neither knows a reference or decides a verdict: the checkers do, from what
``read`` returns.
"""
