class Work {
    int sum(int[] xs) {
        int t = 0;
        // p5:begin loop
        for (int x : xs) {
            if (x < 0) {
                return -1;
            }
            t += x;
        }
        t *= 2;
        // p5:end
        return t;
    }

    int check(int v) {
        /* p5:begin guard */
        if (v > 10) {
            throw new IllegalArgumentException("big");
        }
        return v;
        /* p5:end */
    }

    int ranged(int a) {
        int b = a + 1;
        b *= 2;
        b -= 3;
        return b;
    }
}
