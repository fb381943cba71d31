"""What a user watches live: TensorBoard's curves (`curves`) and the servers of `--dashboard` (`live_view`)."""
