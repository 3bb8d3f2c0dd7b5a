"""The pure ground floor: audio, timing, taxonomy and benchmark types. Imports nothing else of ours."""
