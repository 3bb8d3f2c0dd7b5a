"""A person or a sound card in the loop: ``talk`` (talk to a model by voice), ``models_check`` (one
short session per profile before a long run) and ``audio_io`` (devices and the session player).
"""
