"""Reading a finished run: the funnel and histograms of `swerl data stats` (`stats`) and train/test
splits (`split`)."""
