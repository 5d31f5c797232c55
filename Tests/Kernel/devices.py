"""The real drivers the kernel suite binds to i2c-stub, and the registers it presets for them.

i2c-stub (drivers/i2c/i2c-stub.c) answers SMBus transfers from a plain register file that starts at 0:
one 16-bit word per register, a byte read returning its low byte, an I2C block read the low bytes of
consecutive registers. So every register a driver reads at probe must be preset (its chip ID, and
range/ODR registers it decodes through a table, else e.g. bmi160 answers EINVAL for in_accel_scale),
and the data registers carry the raw values `raw` files and --once then read.

Each axis gets a distinct, non-zero raw value (`raw` below is what the driver's `in_*_raw` must read);
`changed` is a second set a test writes to follow a change. The encodings follow the drivers:
  bmi160      8-bit regmap, le16 (accel 0x12.., gyro 0x0C..)          bmi160_core.c bmi160_get_data
  st_lsm6dsx  le16 (gyro OUTX_L_G 0x22.., accel OUTX_L_A 0x28..)       st_lsm6dsx_read_oneshot
  bmc150      le16, 12 bits for bma255 in the upper bits (0x02..)     bmc150_accel_get_axis
  mxc4005     be16, 12 bits in the upper bits (XOUT_UPPER 0x03..)     mxc4005_read_axis
  kxcjk1013   SMBus word reads, le16, 12 bits upper (XOUT_L 0x06..)   kxcjk1013_get_acc_reg
  mpu6050     be16 (ACCEL_XOUT_H 0x3B.., GYRO_XOUT_H 0x43..)          inv_mpu6050_sensor_show
  fxos8700    be16, accel 14 bits upper (OUT_X_MSB 0x01..), magn 16 bits (M_OUT_X_MSB 0x33..)
Phase 2 (a second boot, PHASE2_CHIPS: i2c-stub serves at most 10 addresses, MAX_CHIPS in i2c-stub.c):
  st_accel/st_gyro/st_magn  le16 (OUT_X_L 0x28..); reads go to REG|0x80 (the auto-increment bit the
              st_sensors regmap sets on every read, read_flag_mask): so do the WHO_AM_I presets
              lis3dh 12 bits upper                                    st_sensors_read_axis_data
  hmc5843     be16 in the order X, Z, Y (0x03..); status 0x09 bit 0 = ready   hmc5843_read_measurement
  bmg160      le16 (RATE_X_LSB 0x02..)                                bmg160_get_axis
  mpu3050     be16 (GYRO_XOUT_H 0x1D..)                               mpu3050_read_raw
  ak8975      le16 (HXL 0x03..); ST1 0x02 bit 0 = data ready, ASA 0x10.. the fuse ROM sensitivities
  kxsd9       be16, 12 bits upper, unsigned (XOUT_H 0x00..)            kxsd9_read_raw
  mc3230      8-bit signed (XOUT 0x00..)                              mc3230_read_raw
  fxas21002c  be16 (OUT_X_MSB 0x01..)                                 fxas21002c_axis_get
The drivers that cannot be bound, and why: Tests/Kernel/README.md.
"""
import ctypes
import fcntl
import os
import re
import struct

I2C_SLAVE_FORCE = 0x0706
I2C_SMBUS = 0x0720
I2C_SMBUS_WRITE, I2C_SMBUS_READ = 0, 1
I2C_SMBUS_BYTE_DATA, I2C_SMBUS_WORD_DATA = 2, 3


class SMBus:
    """Plain SMBus byte/word writes through /dev/i2c-N (what i2cset -f -y does)."""

    def __init__(self, bus):
        self.fd = os.open(f"/dev/i2c-{bus}", os.O_RDWR)
        self.addr = None

    def _xfer(self, addr, rw, cmd, size, data):
        if addr != self.addr:
            fcntl.ioctl(self.fd, I2C_SLAVE_FORCE, addr)
            self.addr = addr
        args = struct.pack("BBxxIQ", rw, cmd, size, ctypes.addressof(data))
        fcntl.ioctl(self.fd, I2C_SMBUS, args)

    def write_byte(self, addr, reg, value):
        data = (ctypes.c_ubyte * 34)(value & 0xFF)
        self._xfer(addr, I2C_SMBUS_WRITE, reg, I2C_SMBUS_BYTE_DATA, data)

    def write_word(self, addr, reg, value):
        data = (ctypes.c_ubyte * 34)(value & 0xFF, (value >> 8) & 0xFF)
        self._xfer(addr, I2C_SMBUS_WRITE, reg, I2C_SMBUS_WORD_DATA, data)

    def read_byte(self, addr, reg):
        data = (ctypes.c_ubyte * 34)()
        self._xfer(addr, I2C_SMBUS_READ, reg, I2C_SMBUS_BYTE_DATA, data)
        return data[0]

    def close(self):
        os.close(self.fd)


def u16(v):
    return v & 0xFFFF


def le16(reg, v):
    return [(reg, u16(v) & 0xFF), (reg + 1, u16(v) >> 8)]


def be16(reg, v):
    return [(reg, u16(v) >> 8), (reg + 1, u16(v) & 0xFF)]


# One entry per i2c client. `sensors`: IIO device name -> {channel type -> (raw x, y, z)}.
# `encode(type, values)` -> list of (register, value, "b"|"w") writes for the data registers.
class Chip:
    def __init__(self, key, driver_name, addr, module, probe_regs, sensors, changed, encode, word=False,
                 attrs=None):
        self.key, self.driver_name, self.addr, self.module = key, driver_name, addr, module
        self.probe_regs, self.sensors, self.changed, self.encode_fn = probe_regs, sensors, changed, encode
        self.word = word
        # Device attributes the suite writes once the driver is bound (as a user would configure it).
        self.attrs = attrs or {}

    def data_writes(self, values=None):
        values = values or self.sensors
        out = []
        for dev, types in values.items():
            for t, xyz in types.items():
                out += self.encode_fn(dev, t, xyz)
        return out


def _bmi160(dev, t, v):
    base = {"accel": 0x12, "anglvel": 0x0C}[t]
    return [w + ("b",) for i in range(3) for w in le16(base + 2 * i, v[i])]


def _lsm6dso(dev, t, v):
    base = {"accel": 0x28, "anglvel": 0x22}[t]
    return [w + ("b",) for i in range(3) for w in le16(base + 2 * i, v[i])]


def _bma255(dev, t, v):
    return [w + ("b",) for i in range(3) for w in le16(0x02 + 2 * i, v[i] << 4)]


def _mxc4005(dev, t, v):
    return [w + ("b",) for i in range(3) for w in be16(0x03 + 2 * i, v[i] << 4)]


def _kxcjk1013(dev, t, v):
    return [(0x06 + 2 * i, u16(v[i] << 4), "w") for i in range(3)]


def _mpu6050(dev, t, v):
    base = {"accel": 0x3B, "anglvel": 0x43}[t]
    return [w + ("b",) for i in range(3) for w in be16(base + 2 * i, v[i])]


def _fxos8700(dev, t, v):
    # accelerometer: 14 bits in the upper bits (the driver shifts right by 2); magnetometer: 16 bits.
    base, shift = {"accel": (0x01, 2), "magn": (0x33, 0)}[t]
    return [w + ("b",) for i in range(3) for w in be16(base + 2 * i, v[i] << shift)]


CHIPS = [
    Chip("bmi160", "bmi160", 0x68, "bmi160_i2c",
         # chip ID; ACC_CONF ODR 100 Hz (0x28), ACC_RANGE ±2 g (0x03), GYR_CONF 100 Hz, GYR_RANGE ±2000 °/s.
         [(0x00, 0xD1), (0x40, 0x28), (0x41, 0x03), (0x42, 0x28), (0x43, 0x00)],
         {"bmi160": {"accel": (1200, -2300, 16100), "anglvel": (110, -220, 330)}},
         {"bmi160": {"accel": (-3100, 4200, -15900), "anglvel": (-440, 550, -660)}},
         _bmi160),
    Chip("lsm6dso", "lsm6dso", 0x6A, "st_lsm6dsx_i2c",
         [(0x0F, 0x6C)],
         {"lsm6dso_accel": {"accel": (1300, -2400, 16200)}, "lsm6dso_gyro": {"anglvel": (130, -260, 390)}},
         {"lsm6dso_accel": {"accel": (-3200, 4300, -15800)}, "lsm6dso_gyro": {"anglvel": (-470, 580, -690)}},
         _lsm6dso),
    Chip("bma255", "bma255", 0x18, "bmc150-accel-i2c",
         [(0x00, 0xFA)],
         {"bma255": {"accel": (150, -250, 500)}},
         {"bma255": {"accel": (-350, 450, -480)}},
         _bma255),
    Chip("mxc4005", "mxc4005", 0x15, "mxc4005",
         [],                                   # the driver checks no ID
         {"mxc4005": {"accel": (160, -260, 1000)}},
         {"mxc4005": {"accel": (-360, 460, -990)}},
         _mxc4005),
    Chip("kxcjk1013", "kxcjk1013", 0x0E, "kxcjk-1013",
         [(0x0F, 0x11)],
         {"kxcjk1013": {"accel": (170, -270, 500)}},
         {"kxcjk1013": {"accel": (-370, 470, -490)}},
         _kxcjk1013, word=True),
    Chip("mpu6050", "mpu6050", 0x69, "inv-mpu6050-i2c",
         [(0x75, 0x68)],
         {"mpu6050": {"accel": (-1500, 2600, 16300), "anglvel": (-120, 240, -360)}},
         {"mpu6050": {"accel": (3300, -4400, -15700), "anglvel": (480, -590, 700)}},
         _mpu6050),
    Chip("fxos8700", "fxos8700", 0x1E, "fxos8700_i2c",
         [(0x0D, 0xC7)],
         {"fxos8700": {"accel": (1400, -2500, 4100), "magn": (310, -420, 530)}},
         {"fxos8700": {"accel": (-3400, 4500, -4000), "magn": (-640, 750, -860)}},
         _fxos8700),
]

def _st(dev, t, v, shift=0):
    # The driver reads OUT_X_L with the auto-increment bit: the data sit at 0xA8...
    return [w + ("b",) for i in range(3) for w in le16(0xA8 + 2 * i, v[i] << shift)]


def _hmc5883l(dev, t, v):
    regs = {0: 0x03, 2: 0x05, 1: 0x07}                 # X, Z, Y in the register file
    return [w + ("b",) for i in range(3) for w in be16(regs[i], v[i])]


def _bmg160(dev, t, v):
    return [w + ("b",) for i in range(3) for w in le16(0x02 + 2 * i, v[i])]


def _mpu3050(dev, t, v):
    # The driver's raw reads of axis k read the be16 at 0x1C + k, not GYRO_XOUT_H + 2k: its
    # MPU3050_AXIS_REGS(axis) (mpu3050-core.c:83) has no parentheses around `axis` and is called with
    # `chan->scan_index-1` (:350). The three reads overlap, so the values share bytes: x = ab, y = bc, z = cd.
    # The values are positive: Debian's 6.1.0-50 kernel publishes these raw reads as unsigned (a
    # negative -3598 read as 61938), 6.1.0-57 as signed ((s16) at :359); see Tests/Kernel/README.md.
    b = [(v[0] >> 8) & 0xFF, v[0] & 0xFF, v[1] & 0xFF, v[2] & 0xFF]
    assert [u16(x) for x in v] == [(b[i] << 8) | b[i + 1] for i in range(3)], f"mpu3050 values {v} do not overlap"
    return [(0x1C + i, b[i], "b") for i in range(4)]


def _fxas21002c(dev, t, v):
    return [w + ("b",) for i in range(3) for w in be16(0x01 + 2 * i, v[i])]


def _ak8975(dev, t, v):
    return [w + ("b",) for i in range(3) for w in le16(0x03 + 2 * i, v[i])]


def _kxsd9(dev, t, v):
    return [w + ("b",) for i in range(3) for w in be16(0x00 + 2 * i, v[i] << 4)]


def _mc3230(dev, t, v):
    return [(0x00 + i, v[i] & 0xFF, "b") for i in range(3)]


# The chips of phase 2. Hobby boards first: LIS3DH and L3GD20 breakouts, the HMC5883L of GY-85 and
# GY-271 (GY-85's ADXL345 and ITG3200 cannot be bound: Tests/Kernel/README.md).
PHASE2_CHIPS = [
    Chip("lis3dh", "lis3dh", 0x18, "st_accel_i2c",
         [(0x0F, 0x33), (0x8F, 0x33)],          # WHO_AM_I, as written and as read (|0x80)
         {"lis3dh": {"accel": (120, -230, 1010)}},
         {"lis3dh": {"accel": (-330, 440, -990)}},
         lambda d, t, v: _st(d, t, v, 4),
         # st_sensors_read_info_raw sleeps 2 sample periods per raw read: 2 s at the 1 Hz it probes with
         attrs={"sampling_frequency": "100"}),
    Chip("l3gd20", "l3gd20", 0x6B, "st_gyro_i2c",
         [(0x0F, 0xD4), (0x8F, 0xD4)],
         {"l3gd20": {"anglvel": (140, -250, 360)}},
         {"l3gd20": {"anglvel": (-470, 580, -690)}},
         _st),
    Chip("lis3mdl", "lis3mdl", 0x1C, "st_magn_i2c",
         [(0x0F, 0x3D), (0x8F, 0x3D)],
         {"lis3mdl": {"magn": (1500, -2600, 3700)}},
         {"lis3mdl": {"magn": (-1800, 2900, -3100)}},
         _st, attrs={"sampling_frequency": "80"}),
    Chip("hmc5883l", "hmc5883l", 0x1E, "hmc5843_i2c",
         [(0x0A, 0x48), (0x0B, 0x34), (0x0C, 0x33), (0x09, 0x01)],   # ID "H43"; status: ready
         {"hmc5883l": {"magn": (210, -320, 430)}},
         {"hmc5883l": {"magn": (-240, 350, -460)}},
         _hmc5883l),
    Chip("bmg160", "bmg160", 0x68, "bmg160_i2c",
         [(0x00, 0x0F)],
         {"bmg160": {"anglvel": (150, -260, 370)}},
         {"bmg160": {"anglvel": (-480, 590, -700)}},
         _bmg160),
    Chip("mpu3050", "mpu3050", 0x69, "mpu3050",
         [(0x00, 0x68)],
         {"mpu3050": {"anglvel": (0x0102, 0x0203, 0x0304)}},          # see _mpu3050
         {"mpu3050": {"anglvel": (4370, 4627, 4884)}},                # 0x1112, 0x1213, 0x1314: see _mpu3050
         _mpu3050),
    Chip("ak8975", "ak8975", 0x0C, "ak8975",
         [(0x00, 0x48), (0x02, 0x01), (0x10, 0x80), (0x11, 0x80), (0x12, 0x80)],  # WIA, ST1 ready, ASA = 128
         {"ak8975": {"magn": (100, -200, 300)}},
         {"ak8975": {"magn": (-400, 500, -600)}},
         _ak8975),
    Chip("kxsd9", "kxsd9", 0x19, "kxsd9-i2c",
         [],                                   # the driver checks no ID
         # offset binary: 2048 is 0 g (the driver publishes in_accel_offset -2048, kxsd9.c:88)
         {"kxsd9": {"accel": (2198, 1788, 2848)}},
         {"kxsd9": {"accel": (1698, 2508, 1258)}},
         _kxsd9),
    Chip("mc3230", "mc3230", 0x4C, "mc3230",
         [(0x18, 0x01), (0x3B, 0x19)],          # chip ID, product code
         {"mc3230": {"accel": (11, -22, 85)}},
         {"mc3230": {"accel": (-33, 44, -84)}},
         _mc3230),
    Chip("fxas21002c", "fxas21002c", 0x20, "fxas21002c_i2c",
         [(0x0C, 0xD7)],
         {"fxas21002c": {"anglvel": (170, -280, 390)}},
         {"fxas21002c": {"anglvel": (-500, 610, -720)}},
         _fxas21002c),
]

HID_SENSORS = {"accel_3d": "accel", "gyro_3d": "anglvel", "magn_3d": "magn"}

# What motion-monitor should list for each IIO device (by its name attribute).
EXPECTED_SENSORS = {
    "bmi160": ["accelerometer", "gyroscope"],
    "lsm6dso_accel": ["accelerometer"],
    "lsm6dso_gyro": ["gyroscope"],
    "bma255": ["accelerometer"],
    "mxc4005": ["accelerometer"],
    "kxcjk1013": ["accelerometer"],
    "mpu6050": ["accelerometer", "gyroscope"],
    "fxos8700": ["accelerometer", "magnetometer"],
    "accel_3d": ["accelerometer"],
    "gyro_3d": ["gyroscope"],
    "magn_3d": ["magnetometer"],
}
PHASE2_SENSORS = {
    "lis3dh": ["accelerometer"], "l3gd20": ["gyroscope"], "lis3mdl": ["magnetometer"],
    "hmc5883l": ["magnetometer"], "bmg160": ["gyroscope"], "mpu3050": ["gyroscope"],
    "ak8975": ["magnetometer"], "kxsd9": ["accelerometer"], "mc3230": ["accelerometer"],
    "fxas21002c": ["gyroscope"],
}

# The row of the report's matrix each IIO device belongs to.
DRIVER_OF = {
    "bmi160": "bmi160", "lsm6dso_accel": "st_lsm6dsx", "lsm6dso_gyro": "st_lsm6dsx",
    "bma255": "bmc150_accel", "mxc4005": "mxc4005", "kxcjk1013": "kxcjk1013",
    "mpu6050": "inv_mpu6050", "fxos8700": "fxos8700",
    "accel_3d": "hid-sensor-accel-3d", "gyro_3d": "hid-sensor-gyro-3d", "magn_3d": "hid-sensor-magn-3d",
    "lis3dh": "st_accel", "l3gd20": "st_gyro", "lis3mdl": "st_magn", "hmc5883l": "hmc5843",
    "bmg160": "bmg160", "mpu3050": "mpu3050", "ak8975": "ak8975", "kxsd9": "kxsd9", "mc3230": "mc3230",
    "fxas21002c": "fxas21002c",
}

MODULES = [c.module for c in CHIPS] + ["i2c-dev", "uhid", "hid-sensor-hub", "hid-sensor-accel-3d",
                                      "hid-sensor-gyro-3d", "hid-sensor-magn-3d"]


PHASE = 1


def use_phase(n):
    """Makes CHIPS, EXPECTED_SENSORS and MODULES those of phase `n` (1: the first chips and the HID
    hub; 2: PHASE2_CHIPS, no hub), for the suite's cases that iterate them."""
    global PHASE, CHIPS, EXPECTED_SENSORS, MODULES
    PHASE = n
    if n == 2:
        CHIPS = PHASE2_CHIPS
        EXPECTED_SENSORS = dict(PHASE2_SENSORS)
        MODULES = [c.module for c in CHIPS] + ["i2c-dev"]


def stub_bus():
    """The i2c-N number of the i2c-stub adapter."""
    for d in sorted(os.listdir("/sys/bus/i2c/devices")):
        if d.startswith("i2c-"):
            try:
                with open(f"/sys/bus/i2c/devices/{d}/name") as f:
                    if "stub" in f.read().lower():
                        return int(d[4:])
            except OSError:
                pass
    raise RuntimeError("no i2c-stub adapter")


def write_regs(bus, chip, writes):
    for reg, value, kind in writes:
        if kind == "w":
            bus.write_word(chip.addr, reg, value)
        else:
            bus.write_byte(chip.addr, reg, value)


def preset(bus, chip):
    write_regs(bus, chip, [(r, v, "b") for r, v in chip.probe_regs])
    write_regs(bus, chip, chip.data_writes())


def bind(busno, chip):
    with open(f"/sys/bus/i2c/devices/i2c-{busno}/new_device", "w") as f:
        f.write(f"{chip.driver_name} 0x{chip.addr:02x}\n")


def unbind(busno, chip):
    with open(f"/sys/bus/i2c/devices/i2c-{busno}/delete_device", "w") as f:
        f.write(f"0x{chip.addr:02x}\n")


# --- Batches: the drivers bound after a phase's own cases, in the same guest ---------------------
# i2c-stub serves at most 10 addresses, so after a phase's cases the suite unbinds its chips, reloads
# i2c-stub (a fresh register file) with the addresses of a batch, presets and binds the batch's chips
# and runs BATCH_CASES on them (suite.py Guest.run_batch). The encodings follow the drivers (Linux 6.1):
#   st_accel lsm303dlhc_accel  le16, 12 bits upper (OUT_X_L 0x28 | 0x80)  st_sensors_read_axis_data
#   st_gyro l3g4200d           le16 (OUT_X_L 0x28 | 0x80)
#   st_magn lsm303dlhc_magn    be16 in the order X, Z, Y (OUT_X_H 0x03; no auto-increment bit)
#   ak8975 ak09911             le16 (HXL 0x11..); ST1 0x10 bit 0 = data ready, ASA 0x60.. fuse ROM
#   bma400                     le16, 12 bits (X_AXIS_LSB 0x04..)       bma400_get_accel_reg
#   adxl372                    be16, 12 bits upper (X_DATA_H 0x08..)    adxl372_read_axis
#   da280                      SMBus word, 14 bits upper (ACC_X_LSB 0x02..)   da280_read_raw
#   da311                      SMBus word, 12 bits upper (OUT_X_L 0x28 | 0x80) da311_read_raw
#   dmard09                    block read from STAT 0x0A: le16 at 0x0C.., bits 3..11   dmard09_read_raw
#   mma7455                    le16, 10 bits (XOUTL 0x00..)             mma7455_read_raw
#   mma7660                    6 bits signed (XOUT 0x00..), bit 6 (alert) clear   mma7660_read_accel
#   stk8ba50                   SMBus word, 10 bits upper (XOUT 0x02..)  stk8ba50_read_accel
#   mag3110                    be16 (OUT_X 0x01..); DR_STATUS 0x00 = 0x07 ready   mag3110_read
#   mmc35240                   le16 (XOUT_L 0x00..); its raw is milligauss computed from them
#                              (mmc35240_raw_to_mgauss: y and z mix the Y and Z registers)
#   bmc150_magn                le16 (X_L 0x42..); its raw is Bosch's compensation with the trim
#                              registers (bmc150_magn_compensate_*), preset as a real chip's
#   mxc6255                    8 bits signed (XOUT 0x00, YOUT 0x01): X and Y only
#   kmx61                      SMBus word reads, le16: accel 12 bits upper (ACC_XOUT_L 0x0A..), magn
#                              14 bits upper (MAG_XOUT_L 0x12..)   kmx61_read_raw


def _le16_regs(base, shift=0, step=2):
    return lambda dev, t, v: [w + ("b",) for i in range(3) for w in le16(base + step * i, v[i] << shift)]


def _be16_regs(base, shift=0):
    return lambda dev, t, v: [w + ("b",) for i in range(3) for w in be16(base + 2 * i, v[i] << shift)]


def _words(base, shift):
    return lambda dev, t, v: [(base + 2 * i, u16(v[i] << shift), "w") for i in range(3)]


def _lsm303dlhc_magn(dev, t, v):
    regs = {0: 0x03, 2: 0x05, 1: 0x07}                 # X, Z, Y in the register file
    return [w + ("b",) for i in range(3) for w in be16(regs[i], v[i])]


def debian_kernel_version():
    """The Debian package version of the running kernel as a tuple ((6, 1, 176) for "Debian
    6.1.176-1" at the end of /proc/version), or None for a kernel that is not Debian's. The
    compiler's version comes first ("gcc-12 (Debian 12.2.0-14+deb12u1)"): the last match is the
    kernel's."""
    with open("/proc/version") as f:
        m = re.findall(r"Debian (\d+)\.(\d+)\.(\d+)-", f.read())
    return tuple(int(g) for g in m[-1]) if m else None


def st_raw_honours_endianness():
    """Whether st_sensors' polled read honours a big-endian channel. Before Debian's 6.1.180-1
    ("iio: common: st_sensors: honour channel endianness in read_axis_data"),
    st_sensors_read_axis_data read every 16-bit channel with get_unaligned_le16, so a big-endian
    channel's in_*_raw (st_magn's lsm303dlhc: IIO_BE in st_magn_core.c:74-84) reads byte-swapped;
    the buffer, decoded by its scan element's `be:` type, is right. Fixed source:
    st_sensors_core.c:514-520 (Debian's linux-source-6.1)."""
    v = debian_kernel_version()
    return v is None or v >= (6, 1, 180)


def _st_be_raw(values):
    """What a big-endian st_sensors channel's in_*_raw reads for register values `values`."""
    if st_raw_honours_endianness():
        return list(values)
    return [struct.unpack("<h", struct.pack(">h", v))[0] for v in values]


def _dmard09(dev, t, v):
    # dmard09_read_raw: `accel <<= 4; accel >>= 7` of the le16: bits 3..11 of the register pair.
    return [w + ("b",) for i in range(3) for w in le16(0x0C + 2 * i, (v[i] << 3) & 0x0FFF)]


def _kmx61(dev, t, v):
    # kmx61_read_measurement: SMBus word reads, le16; accel 12 bits (XOUT_L 0x0A..), magn 14 bits (0x12..).
    base, shift = {"accel": (0x0A, 4), "magn": (0x12, 2)}[t]
    return [(base + 2 * i, u16(v[i] << shift), "w") for i in range(3)]


def _mma7660(dev, t, v):
    return [(0x00 + i, v[i] & 0x3F, "b") for i in range(3)]


def _mxc6255(dev, t, v):
    return [(0x00 + i, v[i] & 0xFF, "b") for i in range(2)]


def _cdiv(a, b):
    """C's integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def mmc35240_raw(v):
    """What mmc35240's in_magn_*_raw read for registers X, Y, Z = v (le16, unsigned), at its probe's
    16-bit resolution (sensitivity 1024 counts per gauss, zero field at 32768) with a zero OTP
    (coefficients 1, 1000 + 0, 13500 + 0 over scales 1, 1000, 10000): mmc35240.c:313-345, :250-256."""
    x, y, z = (_cdiv((r - 32768) * 1000, 1024) for r in v)
    return [_cdiv(x * 1, 1), _cdiv((y - z) * 1000, 1000), _cdiv((y + z) * 13500, 10000)]


# bmc150_magn's trim registers (0x5D..0x71) as a BMM150 is programmed at the factory (values of a
# real chip's); with zeros the kernel divides by zero (Tests/Kernel/README.md, kernel quirks).
def _bmc150_magn_trims():
    out = [(0x5D, 0x00), (0x5E, 0x00)]                 # x1, y1
    out += le16(0x62, 0)                                # z4
    out += [(0x64, 26), (0x65, 26)]                     # x2, y2
    out += le16(0x68, 763) + le16(0x6A, 21350) + le16(0x6C, 6615) + le16(0x6E, 0)   # z2, z1, xyz1, z3
    out += [(0x70, (-3) & 0xFF), (0x71, 29)]            # xy2, xy1
    out += le16(0x48, 6615 << 2)                        # RHALL (bits 15..2)
    return out


def _bmc150_magn(dev, t, v):
    shifts = (3, 3, 1)                                  # BMC150_MAGN_SHIFT_XY_L, _Z_L
    return [w + ("b",) for i in range(3) for w in le16(0x42 + 2 * i, v[i] << shifts[i])]


class BatchChip(Chip):
    """A chip of a batch. `raw_fn(values)` gives what its in_*_raw files read for the register
    values `values` when the driver computes them (mmc35240); `computed` marks a driver whose raw
    values are a calibration formula of many registers (bmc150_magn), checked to follow the
    registers rather than against a value; `axes` is the number of axes it has (mxc6255: 2)."""

    def __init__(self, *a, raw_fn=None, computed=False, axes=3, **k):
        super().__init__(*a, **k)
        self.raw_fn, self.computed, self.axes = raw_fn, computed, axes

    def expected_raw(self, values):
        if self.computed:
            return None
        return list(self.raw_fn(values)) if self.raw_fn else list(values)[:self.axes]


# Phase -> its batches, each a list of at most 10 chips (i2c-stub's MAX_CHIPS). Phase 2's own cases
# take less time than phase 1's, so it binds two batches to phase 1's one.
BATCHES = {
    # phase 1's guest, after its cases
    1: [[
        BatchChip("lsm303dlhc_accel", "lsm303dlhc_accel", 0x19, "st_accel_i2c",
                  [(0x0F, 0x33), (0x8F, 0x33)],
                  {"lsm303dlhc_accel": {"accel": (130, -240, 1020)}},
                  {"lsm303dlhc_accel": {"accel": (-340, 450, -980)}},
                  lambda d, t, v: _st(d, t, v, 4), attrs={"sampling_frequency": "100"}),
        # WHO_AM_I 0x3C at 0x0F (st_magn_core.c's .wai/.wai_addr for lsm303dlhc_magn): before Debian's
        # 6.1.192-1 ("iio: st_sensors: relax WhoAmI check in st_sensors_verify_id()") a mismatch
        # fails the probe ("WhoAmI mismatch (0x0)" on 6.1.0-50); later kernels only warn.
        BatchChip("lsm303dlhc_magn", "lsm303dlhc_magn", 0x1E, "st_magn_i2c",
                  [(0x0F, 0x3C)],
                  {"lsm303dlhc_magn": {"magn": (310, -420, 530)}},
                  {"lsm303dlhc_magn": {"magn": (-250, 360, -470)}},
                  _lsm303dlhc_magn, attrs={"sampling_frequency": "75"}, raw_fn=_st_be_raw),
        BatchChip("l3g4200d", "l3g4200d", 0x69, "st_gyro_i2c",
                  [(0x0F, 0xD3), (0x8F, 0xD3)],
                  {"l3g4200d": {"anglvel": (150, -270, 380)}},
                  {"l3g4200d": {"anglvel": (-490, 510, -620)}},
                  _st, attrs={"sampling_frequency": "100"}),
        BatchChip("ak09911", "ak09911", 0x0C, "ak8975",
                  [(0x00, 0x48), (0x01, 0x05), (0x10, 0x01), (0x60, 0x80), (0x61, 0x80), (0x62, 0x80)],
                  {"ak09911": {"magn": (110, -210, 310)}},
                  {"ak09911": {"magn": (-410, 510, -610)}},
                  _le16_regs(0x11)),
        # Bound by its i2c_device_id "kmx611021" (kmx61.c:1507-1510; "kmx61", the driver's name, matches
        # nothing). Its two IIO devices both carry that name: the suite keys them kmx611021:accel and
        # kmx611021:magn (kk.device_keys).
        BatchChip("kmx61", "kmx611021", 0x0E, "kmx61",
                  [(0x00, 0x12)],                # WHO_AM_I
                  {"kmx611021:accel": {"accel": (140, -250, 510)}, "kmx611021:magn": {"magn": (320, -430, 540)}},
                  {"kmx611021:accel": {"accel": (-360, 470, -500)}, "kmx611021:magn": {"magn": (-650, 760, -870)}},
                  _kmx61, word=True),
    ]],
    # phase 2's guest
    2: [[
        BatchChip("dmard09", "dmard09", 0x1D, "dmard09",
                  [(0x18, 0x95)],
                  {"dmard09": {"accel": (11, -23, 31)}},
                  {"dmard09": {"accel": (-17, 19, -30)}},
                  _dmard09),
        BatchChip("mma7455", "mma7455", 0x1C, "mma7455_i2c",
                  [(0x0F, 0x55), (0x09, 0x01)],  # WHOAMI; STATUS: data ready
                  {"mma7455": {"accel": (21, -32, 63)}},
                  {"mma7455": {"accel": (-43, 54, -62)}},
                  _le16_regs(0x00)),
        BatchChip("mma7660", "mma7660", 0x4C, "mma7660",
                  [],                            # the driver checks no ID
                  {"mma7660": {"accel": (3, -7, 21)}},
                  {"mma7660": {"accel": (-9, 11, -20)}},
                  _mma7660),
        BatchChip("stk8ba50", "stk8ba50", 0x18, "stk8ba50",
                  [],                            # the driver checks no ID
                  {"stk8ba50": {"accel": (17, -28, 255)}},
                  {"stk8ba50": {"accel": (-39, 41, -250)}},
                  _words(0x02, 6), word=True),
        BatchChip("mag3110", "mag3110", 0x0E, "mag3110",
                  [(0x07, 0xC4), (0x00, 0x07)],  # WHO_AM_I; DR_STATUS: X, Y, Z ready
                  {"mag3110": {"magn": (120, -230, 340)}},
                  {"mag3110": {"magn": (-450, 560, -670)}},
                  _be16_regs(0x01)),
        BatchChip("mmc35240", "mmc35240", 0x30, "mmc35240",
                  [(0x06, 0x01)],                # STATUS: measurement done
                  {"mmc35240": {"magn": (32768 + 512, 32768 - 1024, 32768 + 2048)}},
                  {"mmc35240": {"magn": (32768 - 768, 32768 + 1536, 32768 - 256)}},
                  _le16_regs(0x00), raw_fn=mmc35240_raw),
        BatchChip("bmc150_magn", "bmc150_magn", 0x10, "bmc150_magn_i2c",
                  [(0x40, 0x32)] + _bmc150_magn_trims(),
                  {"bmc150_magn": {"magn": (210, -320, 430)}},
                  {"bmc150_magn": {"magn": (-240, 350, -460)}},
                  _bmc150_magn, computed=True),
        BatchChip("mxc6255", "mxc6255", 0x15, "mxc6255",
                  [(0x08, 0x05)],
                  {"mxc6255": {"accel": (23, -34, 0)}},
                  {"mxc6255": {"accel": (-45, 56, 0)}},
                  _mxc6255, axes=2),
    ], [
        BatchChip("bma400", "bma400", 0x14, "bma400_i2c",
                  [(0x00, 0x90), (0x1A, 0x08)],  # chip ID; ACC_CONFIG1: ODR 100 Hz, ±2 g
                  {"bma400": {"accel": (120, -340, 1010)}},
                  {"bma400": {"accel": (-230, 450, -990)}},
                  _le16_regs(0x04)),
        BatchChip("adxl372", "adxl372", 0x53, "adxl372_i2c",
                  [(0x00, 0xAD), (0x01, 0x1D), (0x02, 0xFA)],   # DEVID, MST DEVID, PARTID
                  {"adxl372": {"accel": (14, -25, 105)}},
                  {"adxl372": {"accel": (-36, 47, -98)}},
                  _be16_regs(0x08, 4)),
        BatchChip("da280", "da280", 0x27, "da280",
                  [(0x01, 0x13)],
                  {"da280": {"accel": (520, -930, 4100)}},
                  {"da280": {"accel": (-1240, 1350, -4000)}},
                  _words(0x02, 2), word=True),
        BatchChip("da311", "da311", 0x26, "da311",
                  [(0x0F, 0x13)],
                  {"da311": {"accel": (160, -270, 1020)}},
                  {"da311": {"accel": (-380, 490, -1000)}},
                  _words(0xA8, 4), word=True),
    ]],
}

BATCH_SENSORS = {
    "lsm303dlhc_accel": ["accelerometer"], "lsm303dlhc_magn": ["magnetometer"], "l3g4200d": ["gyroscope"],
    "ak09911": ["magnetometer"], "bma400": ["accelerometer"], "adxl372": ["accelerometer"],
    "da280": ["accelerometer"], "da311": ["accelerometer"], "dmard09": ["accelerometer"],
    "mma7455": ["accelerometer"], "mma7660": ["accelerometer"], "stk8ba50": ["accelerometer"],
    "mag3110": ["magnetometer"], "mmc35240": ["magnetometer"], "bmc150_magn": ["magnetometer"],
    # two axes only: listed, its accelerometer unusable (IIOMotion needs x, y and z; see unusable)
    "mxc6255": ["accelerometer"],
    "kmx611021:accel": ["accelerometer"], "kmx611021:magn": ["magnetometer"],
}
DRIVER_OF.update({
    "lsm303dlhc_accel": "st_accel", "lsm303dlhc_magn": "st_magn", "l3g4200d": "st_gyro", "ak09911": "ak8975",
    "bma400": "bma400", "adxl372": "adxl372", "da280": "da280", "da311": "da311", "dmard09": "dmard09",
    "mma7455": "mma7455", "mma7660": "mma7660", "stk8ba50": "stk8ba50", "mag3110": "mag3110",
    "mmc35240": "mmc35240", "bmc150_magn": "bmc150_magn", "mxc6255": "mxc6255",
    "kmx611021:accel": "kmx61", "kmx611021:magn": "kmx61",
})


def use_batch(chips):
    """Makes CHIPS, EXPECTED_SENSORS and MODULES those of a batch."""
    global CHIPS, EXPECTED_SENSORS, MODULES
    CHIPS = chips
    EXPECTED_SENSORS = {n: BATCH_SENSORS[n] for c in chips for n in c.sensors}
    MODULES = [c.module for c in chips]


# IIO devices of this run whose published scale file cannot be read (name -> the file), found
# after binding (suite.py note_unreadable_scales): dmard09 before Linux 6.1.190 ("iio: accel: dmard09:
# Implement IIO_CHAN_INFO_SCALE" in Debian's changelog; Debian 12's 6.1.0-50 is 6.1.176) lists
# in_accel_scale, and reading it fails with EINVAL.
UNREADABLE_SCALE = {}


def unusable(name):
    """Whether IIO device `name` has fewer than the three axes IIOMotion needs (mxc6255), or a scale
    the kernel lists but cannot read (UNREADABLE_SCALE): listed, but --once fails naming the missing
    channel or the file (suite.py t_two_axes)."""
    return name in UNREADABLE_SCALE or any(name in c.sensors and getattr(c, "axes", 3) < 3 for c in CHIPS)
