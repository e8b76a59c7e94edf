"""Stage 6, render: the prompt and the training row of each kept PR (`rows`)."""
