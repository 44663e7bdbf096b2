import t from 'tap';
import { fnv1a64 } from '../src/util/fnv.js';
t.equal(fnv1a64('berm.log'), 0x718e2c830194e059n);
