"""Plans: the flat step list of a spec under an assumed decision, and its waves."""
