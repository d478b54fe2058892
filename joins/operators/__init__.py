"""One package per operator; see `joins.core.operator` for the layout every operator follows."""
