"""The chapters' examples: one module per chapter, named by the chapter's file stem
(``chapters/tracing.qmd`` -> ``jitbook.chapters.tracing``). Each module holds the code
its page shows and measures; its checkers are in ``jitbook.exercises.<stem>``.
"""
