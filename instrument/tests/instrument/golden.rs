//! Golden tests: every `test_data/<lang>/<case>/` holds `input.<ext>` and `expected.<ext>`,
//! optionally `modes` (words among `functions calls comm`; default functions + comm),
//! `select.toml` and `expected.problems` (one `line:column: message` per line). The output
//! must match byte for byte, keep every line number, and be a fixed point (instrumenting it
//! again changes nothing and finds the same sensor ids). C and C++ outputs must compile
//! (`gcc`/`g++ -fsyntax-only` against `p5.h`), Java outputs must compile with `javac` against
//! the Java client, Python outputs must byte-compile, and Rust outputs must pass `cargo check`
//! (all of them as modules of one crate depending on the runtime).
//! `P5_BLESS=1 cargo test -p p5-instrument golden` rewrites the expected files.

use crate::{have, include_dir, read};
use p5_instrument::{Lang, Modes, Selection, edit::line_count, instrument};
use std::path::Path;
use std::process::Command;

fn modes(dir: &Path) -> Modes {
    let p = dir.join("modes");
    if !p.exists() {
        return Modes::default();
    }
    let t = read(&p);
    let w: Vec<&str> = t.split_whitespace().collect();
    Modes {
        functions: w.contains(&"functions"),
        calls: w.contains(&"calls"),
        comm: w.contains(&"comm"),
    }
}

fn compile_check(lang: Lang, file: &Path) -> Result<(), String> {
    let mut cmd = match lang {
        Lang::C if have("gcc") => {
            let mut c = Command::new("gcc");
            c.args(["-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-function"]);
            c.arg("-I").arg(include_dir()).arg(file);
            c
        }
        Lang::Cpp if have("g++") => {
            let mut c = Command::new("g++");
            c.args([
                "-std=c++17",
                "-fsyntax-only",
                "-Wall",
                "-Werror",
                "-Wno-unused-function",
                "-x",
                "c++",
            ]);
            c.arg("-I").arg(include_dir()).arg(file);
            c
        }
        Lang::Python if have("python3") => {
            let mut c = Command::new("python3");
            c.args(["-m", "py_compile"]).arg(file);
            c
        }
        Lang::Java if have("javac") => {
            // Against the real client, so its generic signatures are checked too.
            let dir = file.parent().unwrap();
            let client = crate::crate_dir().join("../clients/java/src/p5");
            let mut c = Command::new("javac");
            c.arg("-d").arg(dir.join("classes"));
            c.args(
                ["P5.java", "Wire.java", "Recorded.java", "Sockets.java"].map(|f| client.join(f)),
            );
            c.arg(file);
            c
        }
        _ => return Ok(()),
    };
    let out = cmd.output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The output with its sensor table registered (`describe::embed`), checked to strip back to
/// the output and to keep every line where it was.
fn with_table(
    lang: Lang,
    rel: &str,
    name: &str,
    out: &p5_instrument::unit::Outcome,
) -> Result<String, String> {
    use p5_instrument::describe::{embed, strip, table};
    use p5_instrument::manifest::wire_sensor;
    if out.sensors.is_empty() {
        return Ok(out.text.clone());
    }
    let sensors = out
        .sensors
        .iter()
        .map(|s| wire_sensor(rel, lang, s))
        .collect();
    let t = table("/tmp/p5 \"golden\"", rel, lang, &"0".repeat(64), sensors);
    let Some(text) = embed(lang, &out.text, &[t], name) else {
        return match lang {
            Lang::Java => Ok(out.text.clone()),
            _ => Err("no place for the sensor table".into()),
        };
    };
    let back = strip(lang, &text);
    let want = match out.text.ends_with('\n') || lang == Lang::Java {
        true => out.text.clone(),
        false => format!("{}\n", out.text),
    };
    if back != want {
        return Err(format!(
            "stripping the table does not give the output back:\n{back}"
        ));
    }
    let (n, m) = (line_count(&out.text), line_count(&text));
    let kept = match lang {
        Lang::Python | Lang::Java => n == m || (m == n + 1 && text.starts_with(&want)),
        _ => text.starts_with(out.text.trim_end_matches('\n')),
    };
    if !kept {
        return Err(format!("the table moved lines ({n} → {m}):\n{text}"));
    }
    Ok(text)
}

#[test]
fn golden_cases() {
    let bless = std::env::var_os("P5_BLESS").is_some();
    let root = crate::crate_dir().join("test_data");
    let mut cases = 0;
    let mut failures = Vec::new();
    let rust_crate = tempfile::tempdir().unwrap();
    let mut rust_modules = Vec::new();
    let mut langs: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
    langs.sort_by_key(|e| e.path());
    for lang_dir in langs {
        let mut dirs: Vec<_> = std::fs::read_dir(lang_dir.path())
            .unwrap()
            .flatten()
            .collect();
        dirs.sort_by_key(|e| e.path());
        for case in dirs {
            let dir = case.path();
            let Some(input) = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .find(|p| p.file_stem().is_some_and(|s| s == "input"))
            else {
                continue;
            };
            cases += 1;
            let name = dir.strip_prefix(&root).unwrap().display().to_string();
            let lang = Lang::from_path(&input).expect("input extension");
            let ext = input.extension().unwrap().to_str().unwrap();
            let rel = format!("input.{ext}");
            let src = read(&input);
            let sel = if dir.join("select.toml").exists() {
                Selection::load(&dir.join("select.toml")).unwrap()
            } else {
                Selection::all()
            };
            let m = modes(&dir);
            let out = instrument(lang, &rel, &src, m, &sel);
            let problems: String = out
                .problems
                .iter()
                .map(|p| format!("{}:{}: {}\n", p.line, p.column, p.message))
                .collect();
            let expected_path = dir.join(format!("expected.{ext}"));
            let problems_path = dir.join("expected.problems");
            if bless {
                std::fs::write(&expected_path, &out.text).unwrap();
                if problems.is_empty() {
                    let _ = std::fs::remove_file(&problems_path);
                } else {
                    std::fs::write(&problems_path, &problems).unwrap();
                }
            }
            let expected = read(&expected_path);
            if out.text != expected {
                failures.push(format!(
                    "{name}: output differs from expected.{ext}\n{}",
                    out.text
                ));
                continue;
            }
            let want_problems = if problems_path.exists() {
                read(&problems_path)
            } else {
                String::new()
            };
            if problems != want_problems {
                failures.push(format!("{name}: problems differ:\n{problems}"));
            }
            if line_count(&out.text) != line_count(&src) {
                failures.push(format!("{name}: line count changed"));
            }
            if out.sensors.is_empty() && !dir.join("no-sensors").exists() {
                failures.push(format!("{name}: no sensors"));
            }
            let again = instrument(lang, &rel, &out.text, m, &sel);
            if again.text != out.text {
                failures.push(format!("{name}: not a fixed point:\n{}", again.text));
            }
            let mut ids: Vec<u64> = out.sensors.iter().map(|s| s.id).collect();
            let mut ids2: Vec<u64> = again.sensors.iter().map(|s| s.id).collect();
            ids.sort_unstable();
            ids2.sort_unstable();
            if ids != ids2 {
                failures.push(format!("{name}: re-instrumenting found other ids"));
            }
            // What is compiled below carries the sensor table as `p5-instrument -o` writes it.
            let text = match with_table(lang, &rel, &name, &out) {
                Ok(t) => t,
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            if lang == Lang::Rust && !dir.join("no-compile").exists() {
                let module = name.replace(['/', '-'], "_");
                std::fs::create_dir_all(rust_crate.path().join("src")).unwrap();
                std::fs::write(rust_crate.path().join(format!("src/{module}.rs")), &text).unwrap();
                rust_modules.push(module);
            } else if !dir.join("no-compile").exists() {
                let tmp = tempfile::tempdir().unwrap();
                let f = tmp.path().join(&rel);
                std::fs::write(&f, &text).unwrap();
                if let Err(e) = compile_check(lang, &f) {
                    failures.push(format!("{name}: output does not compile:\n{e}"));
                }
            }
        }
    }
    if !rust_modules.is_empty()
        && let Err(e) = cargo_check(rust_crate.path(), &rust_modules)
    {
        failures.push(format!("Rust outputs do not compile:\n{e}"));
    }
    assert!(cases >= 5, "only {cases} golden cases found");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Python cases with a `__main__` block run the same before and after instrumentation: same
/// output, same exit status (the client spools its events to a temporary folder).
#[test]
fn python_behaviour() {
    if !have("python3") {
        return;
    }
    let root = crate::crate_dir().join("test_data/python");
    let client = crate::crate_dir().join("../clients/python");
    let spool = tempfile::tempdir().unwrap();
    let mut ran = 0;
    let mut failures = Vec::new();
    for case in std::fs::read_dir(&root).unwrap().flatten() {
        let dir = case.path();
        let input = dir.join("input.py");
        if !input.exists() || !read(&input).contains("__main__") {
            continue;
        }
        let outputs: Vec<_> = ["input.py", "expected.py"]
            .iter()
            .map(|f| {
                Command::new("python3")
                    .arg(dir.join(f))
                    .env("PYTHONPATH", &client)
                    .env("P5_DIR", spool.path())
                    .env_remove("P5_LOGSERVER")
                    .output()
                    .unwrap()
            })
            .collect();
        ran += 1;
        let show = |o: &std::process::Output| {
            format!(
                "status {:?}\n{}{}",
                o.status.code(),
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        if !outputs[0].status.success() {
            failures.push(format!(
                "{}: input fails: {}",
                dir.display(),
                show(&outputs[0])
            ));
        } else if show(&outputs[0]) != show(&outputs[1]) {
            failures.push(format!(
                "{}: behaviour changed\n--- input\n{}--- expected\n{}",
                dir.display(),
                show(&outputs[0]),
                show(&outputs[1])
            ));
        }
    }
    assert!(ran >= 3, "only {ran} runnable Python cases");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `cargo check` of a crate made of `modules` (files in `dir/src`) and the runtime.
fn cargo_check(dir: &Path, modules: &[String]) -> Result<(), String> {
    let lib: String = modules.iter().map(|m| format!("pub mod {m};\n")).collect();
    std::fs::write(dir.join("src/lib.rs"), lib).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"p5-golden\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\n{}\n\n[workspace]\n",
            p5_instrument::runtime::cargo_dependency()
        ),
    )
    .unwrap();
    let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["check", "-q", "--offline", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", crate::e2e_target_dir())
        .env_remove("RUSTFLAGS")
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
