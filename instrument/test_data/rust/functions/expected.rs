//! A module with every kind of fn.
use std::io;

pub struct Counter {
    n: u64,
}

impl Counter {
    pub fn new() -> Self { let _p5_guard = p5_runtime::scope(0x63be4eeded3613e6);
        Counter { n: 0 }
    }

    pub fn bump(&mut self) -> io::Result<u64> { let _p5_guard = p5_runtime::scope(0xa291ef112817476a);
        if self.n > 10 {
            return Err(io::Error::other("full"));
        }
        self.n += 1;
        Ok(self.n)
    }

    pub const fn limit() -> u64 {
        10
    }
}

pub trait Named {
    fn name(&self) -> String { let _p5_guard = p5_runtime::scope(0x9f8c2cecc24206e8);
        String::from("anon")
    }
    fn id(&self) -> u64;
}

pub async fn later() -> u32 {
    1
}

mod inner {
    pub fn total(xs: &[u64]) -> u64 { let _p5_guard = p5_runtime::scope(0xc2d7ce31ef58110a);
        let mut t = 0;
        // p5:begin sum
        let _p5_region_0 = p5_runtime::scope(0x8f56ed5ce6d9d2d6); p5_runtime::mark(0xe2fa4a1185ee9a47); for x in xs {
            t += x;
        }
        p5_runtime::mark(0xefaa0b3c033f7de4); t *= 2; drop(_p5_region_0);
        // p5:end
        t
    }
}

fn parse(s: &str) -> Result<u64, std::num::ParseIntError> { let _p5_guard = p5_runtime::scope(0xdb475add8f168b5f);
    let v = s.trim().parse::<u64>()?;
    Ok(v + inner::total(&[v]))
}

fn quiet() {
    #![allow(unused_variables)] let _p5_guard = p5_runtime::scope(0x231cd108b87b343a);
    // the guard goes after the inner attribute
    let x = 1;
}
