//! The front end, embedded in the binary (no CDN, no build step, works offline): one HTML
//! page, one stylesheet and plain JavaScript modules drawing on canvases.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `(path, content type, bytes)` of every embedded file.
const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../assets/index.html"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/style.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/app.js"),
    ),
    (
        "gantt.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/gantt.js"),
    ),
    (
        "stats.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/stats.js"),
    ),
    (
        "source.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/source.js"),
    ),
    (
        "paths.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/paths.js"),
    ),
    (
        "pathdraw.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/pathdraw.js"),
    ),
    (
        "instance.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/instance.js"),
    ),
    (
        "flows.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/flows.js"),
    ),
    (
        "compare.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/compare.js"),
    ),
    (
        "util.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/util.js"),
    ),
];

/// The embedded file at `path` (`""` is `index.html`), if any.
pub fn get(path: &str) -> Option<(&'static str, &'static [u8])> {
    let path = if path.is_empty() { "index.html" } else { path };
    FILES
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|&(_, ct, bytes)| (ct, bytes))
}

/// Serves an embedded file, or a plain 404.
pub fn serve(path: &str) -> Response {
    match get(path) {
        Some((ct, bytes)) => (
            [
                (header::CONTENT_TYPE, ct),
                (header::CACHE_CONTROL, "no-cache"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn index_references_only_embedded_files() {
        let (_, html) = super::get("").unwrap();
        let html = std::str::from_utf8(html).unwrap();
        for name in ["style.css", "app.js"] {
            assert!(html.contains(name), "{name}");
            assert!(super::get(name).is_some());
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(super::get("../Cargo.toml").is_none());
    }
}
