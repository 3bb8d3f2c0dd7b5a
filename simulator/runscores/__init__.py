"""The scores of a run (``duplexsim score``): ``score`` cuts replies and references and sends them
to a scorer, ``cache`` keeps scores per scorer identity in the run, ``references`` shares a
benchmark's reference scores between runs. The scorers themselves live in ``duplexsim.scoring``.
"""
