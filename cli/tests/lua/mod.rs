//! The Lua 5.4 interpreter (crates.io `lua-src`, code nobody here wrote) instrumented with
//! `p5-instrument --functions` and built against the runtime, for the tests that record it.

#![allow(dead_code)]

use p5_tracedb::read::{self, Reader};
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../testsupport/crate_source.rs"]
mod crate_source;
pub use crate_source::crate_source;

/// The interpreter's `main` (the crate ships the library without `lua.c`).
const MAIN: &str = r#"#include <stdio.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

int main(int argc, char **argv) {
    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    if (argc < 2 || luaL_dofile(L, argv[1]) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_close(L);
    return 0;
}
"#;

/// Lua's sources and a `main` instrumented (`--functions`) into `work/out` and built with
/// optimisation `opt` as `work/lua`.
pub fn build_lua(work: &Path, opt: &str) -> PathBuf {
    let lua = crate_source("lua-src", "547", work).join("lua-5.4.7");
    let src = work.join("src");
    std::fs::create_dir_all(&src).unwrap();
    for e in std::fs::read_dir(&lua).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if (name.ends_with(".c") || name.ends_with(".h")) && name != "luac.c" && name != "onelua.c"
        {
            std::fs::copy(e.path(), src.join(&name)).unwrap();
        }
    }
    std::fs::write(src.join("main.c"), MAIN).unwrap();
    let out = work.join("out");
    let report = p5_instrument::run(&p5_instrument::Options {
        paths: vec![src],
        out: Some(out.clone()),
        modes: p5_instrument::Modes {
            functions: true,
            ..p5_instrument::Modes::default()
        },
        ..p5_instrument::Options::default()
    })
    .unwrap();
    assert!(report.sensors.len() > 1000, "{}", report.sensors.len());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    sources.sort();
    let exe = work.join("lua");
    let lib = p5_instrument::runtime::static_lib().expect("libp5_runtime.a");
    let st = Command::new("gcc")
        .args([opt, "-w", "-DLUA_USE_LINUX", "-I"])
        .arg(&out)
        .arg("-I")
        .arg(out.join(p5_instrument::runtime::INCLUDE_DIR))
        .args(&sources)
        .arg(&lib)
        .args(["-lm", "-ldl", "-lpthread", "-lrt", "-o"])
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "gcc failed");
    exe
}

/// Records `lua script` with `p5 record --no-agent` and the runtime's defaults (no
/// `P5_THROTTLE` or `P5_FULL` from the environment) into `store`, as session `session`;
/// asserts it succeeded and returns what it printed.
pub fn record(lua: &Path, script: &Path, store: &Path, session: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", session, "--store"])
        .arg(store)
        .arg("--")
        .arg(lua)
        .arg(script)
        .env_remove("P5_THROTTLE")
        .env_remove("P5_FULL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// Runs `f` on the SQLite trace database of `store` and its first session's id.
pub fn read_session<T>(store: &Path, f: impl AsyncFnOnce(&Reader, i64) -> T) -> T {
    let url = format!("sqlite:{}", store.join("p5.sqlite").display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        f(&db, s.id).await
    })
}
