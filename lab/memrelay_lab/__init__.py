"""memrelay-lab: run memrelay experiments and analyse what they measured."""
