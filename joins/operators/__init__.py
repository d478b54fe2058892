"""One package per operator; see `joins.operators.base` for the layout every operator follows."""
