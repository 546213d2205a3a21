//! Sensors that describe themselves (issue 13 part 4): the Lua 5.4 interpreter (crates.io
//! `lua-src`, code nobody here wrote) instrumented with `p5-instrument --functions`, built,
//! and recorded with `p5 record -- ./lua script` and no other flag — no `--manifest`. Every
//! recorded sensor is named from the tables the instrumented files registered, and clicking
//! back from a sensor (`p5 web`'s source API) gives the Lua source with the function's lines.

mod web_get;

use p5_tracedb::read;
use std::path::{Path, PathBuf};
use std::process::Command;
use web_get::web_get;

/// Where a crates.io crate's source was unpacked (`cargo metadata` on a throw-away package).
fn crate_source(name: &str, req: &str, work: &Path) -> PathBuf {
    let probe = work.join(format!("probe-{name}"));
    std::fs::create_dir_all(probe.join("src")).unwrap();
    std::fs::write(
        probe.join("Cargo.toml"),
        format!(
            "[package]\nname = \"probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             [dependencies]\n{name} = \"{req}\"\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(probe.join("src/lib.rs"), "").unwrap();
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(probe.join("Cargo.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata for {name} failed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkg = v["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap();
    Path::new(pkg["manifest_path"].as_str().unwrap())
        .parent()
        .unwrap()
        .to_path_buf()
}

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

/// Lua's sources and a `main` instrumented into `work/out` and built as `work/lua`.
fn build_lua(work: &Path) -> PathBuf {
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
        .args(["-O1", "-w", "-DLUA_USE_LINUX", "-I"])
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

#[test]
fn a_recorded_lua_names_its_sensors_and_clicks_back_without_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_lua(dir.path());
    let script = dir.path().join("work.lua");
    std::fs::write(
        &script,
        "local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end\n\
         local t = {} for i = 1, 2000 do t[i] = (i * 7919) % 1000 end table.sort(t)\n\
         print(fib(18), t[1], string.find(\"hello world\", \"o w\"))\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let o = Command::new(env!("CARGO_BIN_EXE_p5"))
        .args(["record", "--no-agent", "--session", "lua", "--store"])
        .arg(&store)
        .arg("--")
        .arg(&exe)
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("2584\t"), "{stdout}");
    assert!(
        !stdout.contains("--manifest"),
        "asks for a manifest:\n{stdout}"
    );
    let db = store.join("p5.sqlite");
    let url = format!("sqlite:{}", db.display());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (sid, sensors, lvm) = rt.block_on(async {
        let db = read::Reader::open(&p5_tracedb::DbUrl::parse(&url).unwrap())
            .await
            .unwrap();
        let s = read::sessions(&db).await.unwrap().remove(0);
        let sensors = read::sensors(&db, s.id).await.unwrap();
        let v = sensors.iter().find(|s| s.name == "luaV_execute").unwrap();
        let file = v.source_file_id.expect("luaV_execute has a source file");
        let lvm = read::source_file(&db, s.id, file).await.unwrap().unwrap();
        (s.id, sensors, lvm)
    });
    // Every sensor the run fired (and every other one of the tables) has a name and a place.
    let unnamed: Vec<_> = sensors.iter().filter(|s| s.file.is_none()).collect();
    assert!(unnamed.is_empty(), "{} unnamed: {unnamed:?}", unnamed.len());
    let names: Vec<&str> = sensors.iter().map(|s| s.name.as_str()).collect();
    for f in [
        "luaV_execute",
        "luaD_rawrunprotected",
        "main",
        "luaH_getstr",
    ] {
        assert!(names.contains(&f), "{f} missing");
    }
    assert_eq!(lvm.path, "lvm.c");
    assert!(
        lvm.lines > 1000 && lvm.text.is_some(),
        "{} lines",
        lvm.lines
    );
    // Click-back: the source panel of luaV_execute shows lvm.c at the function's lines.
    let v = sensors.iter().find(|s| s.name == "luaV_execute").unwrap();
    let panel = web_get(
        &db,
        &format!("/api/v1/sessions/{sid}/sensors/{}/source", v.hex),
    );
    let text = panel["text"].as_str().unwrap_or_default();
    let line = v.line.unwrap() as usize;
    let at = text.lines().nth(line - 1).unwrap_or_default();
    assert!(at.contains("luaV_execute"), "line {line}: {at:?}\n{panel}");
    assert_eq!(panel["file"]["path"], "lvm.c", "{panel}");
}
