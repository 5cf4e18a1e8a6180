"""CDEG: the Counterfactual Diagnostic Evidence Graph (CDEG paper).

Construction from run logs, counterfactual validation, the graph file, and the
evidence-state policy wrapper; see the modules of this package.
"""
