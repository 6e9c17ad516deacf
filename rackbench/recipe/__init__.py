"""What a recipe says: the strict schemas, extends chains, flags read once, the topology, the loaded Profile."""
