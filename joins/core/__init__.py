"""Types every operator shares: the key-equality rule (`keys`), field paths and JSON value rules
(`fields`), the versioned-input spec (`versioned`) and the table stores with their put outcome
(`store`). Nothing here imports an operator, so any operator can import any of it."""
