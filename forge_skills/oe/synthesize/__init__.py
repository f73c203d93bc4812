"""S1 and S4: blueprints, templates, answer rules, bindings and items."""
