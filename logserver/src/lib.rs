//! p5-logserver (placeholder, being written).
