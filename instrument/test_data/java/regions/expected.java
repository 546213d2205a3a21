class Work {
    int sum(int[] xs) { p5.P5.enter(0x1c3897b74e4ef013L); try {
        int t = 0;
        p5.P5.enter(0x0300f7ec07b1d0a7L); // p5:begin loop
        p5.P5.mark(0x0aa2af4c2dc59868L); for (int x : xs) {
            if (x < 0) {
                { p5.P5.exit(0x0300f7ec07b1d0a7L); return -1; }
            }
            t += x;
        }
        p5.P5.mark(0xfdf2ee21b074b4cbL); t *= 2;
        p5.P5.exit(0x0300f7ec07b1d0a7L); // p5:end
        return t;
    } finally { p5.P5.exit(0x1c3897b74e4ef013L); } }

    int check(int v) { p5.P5.enter(0x85c954fa54c9338aL); try {
        p5.P5.enter(0x1093da6b96aa2156L); /* p5:begin guard */
        p5.P5.mark(0xdbd47932060473c7L); if (v > 10) {
            { p5.P5.exit(0x1093da6b96aa2156L); throw new IllegalArgumentException("big"); }
        }
        p5.P5.mark(0xe8823a5c8351f164L); { p5.P5.exit(0x1093da6b96aa2156L); return v; }
        /* p5:end */
    } finally { p5.P5.exit(0x85c954fa54c9338aL); } }

    int ranged(int a) { p5.P5.enter(0x2d4fc9edce25a289L); try {
        int b = a + 1;
        p5.P5.enter(0x05fdbedaa22052e1L); p5.P5.mark(0xb27fa44d207729a6L); b *= 2;
        p5.P5.mark(0xa5cfe322a3264609L); b -= 3; p5.P5.exit(0x05fdbedaa22052e1L);
        return b;
    } finally { p5.P5.exit(0x2d4fc9edce25a289L); } }
}
