"""S2 collect: plan and collect scenes and real-image units."""
