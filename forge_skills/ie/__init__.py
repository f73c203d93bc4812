"""The Interactive Embodied (IE) track: restorable tasks in household environments, verifiers
compiled from goals, execution gates, and episodes."""
