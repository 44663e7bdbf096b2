/* Engine test guest (generated): 150 switch statements (jump tables) and loops in one function,
 * so a translation that is quadratic in jump-table targets shows as a huge module. */
typedef unsigned long u64; u64 t[64];
u64 huge(u64 a, u64 b) { u64 c = 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+0) & 63] ^ b; if (c & 1) break; }
  while (b > 132344) b >>= 1;
  switch ((a + 2) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+3) & 63] ^ b; if (c & 1) break; }
  switch ((a + 4) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 5) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 6) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 796110) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+8) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+9) & 63] ^ b; if (c & 1) break; }
  switch ((a + 10) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+11) & 63] ^ b; if (c & 1) break; }
  switch ((a + 12) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 13) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 4416) b >>= 1;
  while (b > 934044) b >>= 1;
  switch ((a + 16) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 479749) b >>= 1;
  while (b > 214385) b >>= 1;
  switch ((a + 19) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+20) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+21) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+22) & 63] ^ b; if (c & 1) break; }
  while (b > 19304) b >>= 1;
  switch ((a + 24) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 454241) b >>= 1;
  switch ((a + 26) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 60902) b >>= 1;
  while (b > 464921) b >>= 1;
  switch ((a + 29) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 30) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 488813) b >>= 1;
  switch ((a + 32) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+33) & 63] ^ b; if (c & 1) break; }
  while (b > 458817) b >>= 1;
  switch ((a + 35) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 36) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+37) & 63] ^ b; if (c & 1) break; }
  switch ((a + 38) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 209715) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+40) & 63] ^ b; if (c & 1) break; }
  while (b > 621575) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+42) & 63] ^ b; if (c & 1) break; }
  while (b > 697712) b >>= 1;
  while (b > 885222) b >>= 1;
  while (b > 398143) b >>= 1;
  switch ((a + 46) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 47) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 1047238) b >>= 1;
  while (b > 824922) b >>= 1;
  while (b > 72405) b >>= 1;
  switch ((a + 51) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+52) & 63] ^ b; if (c & 1) break; }
  while (b > 847853) b >>= 1;
  switch ((a + 54) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 362822) b >>= 1;
  switch ((a + 56) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 785809) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+58) & 63] ^ b; if (c & 1) break; }
  switch ((a + 59) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 226348) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+61) & 63] ^ b; if (c & 1) break; }
  while (b > 824715) b >>= 1;
  switch ((a + 63) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 64) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 62023) b >>= 1;
  switch ((a + 66) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+67) & 63] ^ b; if (c & 1) break; }
  switch ((a + 68) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 825438) b >>= 1;
  while (b > 357248) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+71) & 63] ^ b; if (c & 1) break; }
  while (b > 475922) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+73) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+74) & 63] ^ b; if (c & 1) break; }
  while (b > 486908) b >>= 1;
  switch ((a + 76) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 721055) b >>= 1;
  while (b > 740869) b >>= 1;
  switch ((a + 79) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 80) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 11972) b >>= 1;
  switch ((a + 82) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 271055) b >>= 1;
  while (b > 430933) b >>= 1;
  switch ((a + 85) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+86) & 63] ^ b; if (c & 1) break; }
  switch ((a + 87) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 88) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 419093) b >>= 1;
  while (b > 866962) b >>= 1;
  switch ((a + 91) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 92) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 93) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 94) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+95) & 63] ^ b; if (c & 1) break; }
  while (b > 694445) b >>= 1;
  switch ((a + 97) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 58667) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+99) & 63] ^ b; if (c & 1) break; }
  while (b > 371638) b >>= 1;
  while (b > 379131) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+102) & 63] ^ b; if (c & 1) break; }
  while (b > 535390) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+104) & 63] ^ b; if (c & 1) break; }
  while (b > 147751) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+106) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+107) & 63] ^ b; if (c & 1) break; }
  switch ((a + 108) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+109) & 63] ^ b; if (c & 1) break; }
  switch ((a + 110) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+111) & 63] ^ b; if (c & 1) break; }
  switch ((a + 112) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+113) & 63] ^ b; if (c & 1) break; }
  while (b > 387155) b >>= 1;
  switch ((a + 115) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 116) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+117) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+118) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+119) & 63] ^ b; if (c & 1) break; }
  switch ((a + 120) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 352625) b >>= 1;
  while (b > 572343) b >>= 1;
  while (b > 617596) b >>= 1;
  switch ((a + 124) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 675286) b >>= 1;
  switch ((a + 126) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 127) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+128) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+129) & 63] ^ b; if (c & 1) break; }
  switch ((a + 130) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 131) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 132) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  switch ((a + 133) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+134) & 63] ^ b; if (c & 1) break; }
  switch ((a + 135) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+136) & 63] ^ b; if (c & 1) break; }
  switch ((a + 137) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 438495) b >>= 1;
  while (b > 905247) b >>= 1;
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+140) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+141) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+142) & 63] ^ b; if (c & 1) break; }
  switch ((a + 143) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+144) & 63] ^ b; if (c & 1) break; }
  for (u64 i = 0; i < (a & 7); i++) { c += t[(i+145) & 63] ^ b; if (c & 1) break; }
  while (b > 336021) b >>= 1;
  switch ((a + 147) & 7) { case 0: c++; break; case 1: b += c; break; case 2: a ^= b; break; case 3: c *= 5; break; case 4: t[c&63] = a; break; case 5: b = a - c; break; default: a++; }
  while (b > 894781) b >>= 1;
  while (b > 462631) b >>= 1;
  return a + b + c; }
void _start(void) {}
