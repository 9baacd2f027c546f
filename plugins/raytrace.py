"""Ray tracer, FROST's own test problem: spheres on a checkered plane lit by point lights, with
hard shadows and mirror reflection. Bands of rows are the work units, one row per step, PNG out.

Only + - * / and math.sqrt (correctly rounded everywhere) touch floats, so a row renders to the
same bytes on every machine; the specular power is an integer power by repeated products.
"""

from __future__ import annotations

import math

from frost_core import Param, RowBands

# (centre, radius, colour, reflectivity, specular exponent)
SPHERES = (
    ((0.0, 1.0, 4.0), 1.0, (0.85, 0.18, 0.15), 0.25, 32),
    ((-2.3, 0.75, 5.0), 0.75, (0.20, 0.70, 0.25), 0.10, 16),
    ((2.2, 1.25, 5.6), 1.25, (0.85, 0.85, 0.90), 0.70, 64),
    ((0.9, 0.4, 2.6), 0.4, (0.20, 0.35, 0.90), 0.30, 32),
)
PLANE_COLOURS = ((0.90, 0.90, 0.85), (0.15, 0.15, 0.18))  # checkerboard on y = 0
PLANE_REFLECTIVITY = 0.2
LIGHTS = (((-5.0, 7.0, -2.0), 0.75), ((5.0, 5.0, 1.0), 0.45))  # (position, intensity)
AMBIENT = 0.08
CAMERA = (0.0, 1.6, -2.5)
FOCAL = 1.4  # distance of the image plane; larger narrows the view
TILT = -0.2  # the camera looks slightly down
EPSILON = 1e-6
FAR = 1e30


class RayTracer(RowBands):
    name = "raytrace"
    version = "1.0"
    description = "Ray-traces a fixed scene (spheres, plane, two lights, shadows, reflection) to a PNG."
    params = (
        Param("width", int, 640, "image width in pixels", minimum=1, maximum=8192),
        Param("height", int, 480, "image height in pixels", minimum=1, maximum=8192),
        Param("rows_per_unit", int, 8, "rows in one work unit", minimum=1, maximum=8192),
        Param("max_depth", int, 3, "how many reflections a ray may follow", minimum=0, maximum=16),
        Param("samples", int, 1, "anti-aliasing: samples x samples rays per pixel", minimum=1, maximum=8),
    )

    view_params = ("width", "height", "max_depth", "samples")
    image_name = "raytrace"

    def row_cost(self, params: dict) -> float:
        return float(params["width"] * params["samples"] ** 2 * (params["max_depth"] + 1))

    def render_row(self, view: dict, y: int) -> bytes:
        return render_row(view["width"], view["height"], y, view["max_depth"], view["samples"])


def render_row(width: int, height: int, y: int, max_depth: int, samples: int) -> bytes:
    """One row of 8-bit RGB pixels, each the mean of a samples x samples grid of rays."""
    out = bytearray()
    scale = 1.0 / height  # square pixels; the image plane is 1 unit tall at FOCAL
    weight = 1.0 / (samples * samples)
    for x in range(width):
        r = g = b = 0.0
        for sy in range(samples):
            for sx in range(samples):
                u = (x + (sx + 0.5) / samples - width * 0.5) * scale
                v = (height * 0.5 - (y + (sy + 0.5) / samples)) * scale
                cr, cg, cb = trace(CAMERA, camera_ray(u, v), max_depth)
                r += cr
                g += cg
                b += cb
        out += bytes((to_byte(r * weight), to_byte(g * weight), to_byte(b * weight)))
    return bytes(out)


def camera_ray(u: float, v: float) -> tuple[float, float, float]:
    """Unit direction through image-plane point (u, v), tilted down by TILT."""
    dy = v + TILT
    dz = FOCAL - v * TILT
    return normalise((u, dy, dz))


def trace(origin: tuple, direction: tuple, depth: int) -> tuple[float, float, float]:
    """Colour seen along a ray: local shading plus, for reflective surfaces, the mirrored ray."""
    t, sphere = nearest_hit(origin, direction)
    if sphere is None and direction[1] >= 0.0:
        return sky(direction)
    if sphere is None:
        t = -origin[1] / direction[1]
        if t >= FAR:
            return sky(direction)
        point = (origin[0] + t * direction[0], 0.0, origin[2] + t * direction[2])
        normal = (0.0, 1.0, 0.0)
        colour = PLANE_COLOURS[(math.floor(point[0]) + math.floor(point[2])) & 1]
        reflectivity, shininess = PLANE_REFLECTIVITY, 0
    else:
        centre, radius, colour, reflectivity, shininess = sphere
        point = (origin[0] + t * direction[0], origin[1] + t * direction[1], origin[2] + t * direction[2])
        inverse = 1.0 / radius
        normal = ((point[0] - centre[0]) * inverse, (point[1] - centre[1]) * inverse, (point[2] - centre[2]) * inverse)
    local = shade(point, normal, direction, colour, shininess)
    if depth <= 0 or reflectivity <= 0.0:
        return local
    d_n = 2.0 * dot(direction, normal)
    mirrored = (direction[0] - d_n * normal[0], direction[1] - d_n * normal[1], direction[2] - d_n * normal[2])
    start = (point[0] + EPSILON * normal[0], point[1] + EPSILON * normal[1], point[2] + EPSILON * normal[2])
    seen = trace(start, mirrored, depth - 1)
    keep = 1.0 - reflectivity
    return (
        keep * local[0] + reflectivity * seen[0],
        keep * local[1] + reflectivity * seen[1],
        keep * local[2] + reflectivity * seen[2],
    )


def shade(point: tuple, normal: tuple, direction: tuple, colour: tuple, shininess: int) -> tuple[float, float, float]:
    """Ambient + Lambert diffuse + Phong specular from every light that is not in shadow."""
    diffuse = AMBIENT
    specular = 0.0
    start = (point[0] + EPSILON * normal[0], point[1] + EPSILON * normal[1], point[2] + EPSILON * normal[2])
    for position, intensity in LIGHTS:
        to_light = (position[0] - start[0], position[1] - start[1], position[2] - start[2])
        distance = math.sqrt(dot(to_light, to_light))
        towards = (to_light[0] / distance, to_light[1] / distance, to_light[2] / distance)
        lambert = dot(normal, towards)
        if lambert <= 0.0:
            continue
        blocked, _ = nearest_hit(start, towards)
        if blocked < distance:
            continue  # hard shadow
        diffuse += intensity * lambert
        if shininess:
            n_l = 2.0 * lambert
            reflected = (n_l * normal[0] - towards[0], n_l * normal[1] - towards[1], n_l * normal[2] - towards[2])
            facing = -dot(reflected, direction)
            if facing > 0.0:
                specular += intensity * integer_power(facing, shininess)
    return (colour[0] * diffuse + specular, colour[1] * diffuse + specular, colour[2] * diffuse + specular)


def nearest_hit(origin: tuple, direction: tuple) -> tuple[float, tuple | None]:
    """Distance to the nearest sphere along a unit ray (FAR and None when there is none).

    The plane is left to the caller: every sphere rests on it and every light is above it,
    so it can neither hide a sphere from a ray that reaches the sphere nor cast a shadow."""
    best, hit = FAR, None
    ox, oy, oz = origin
    dx, dy, dz = direction
    for sphere in SPHERES:
        (cx, cy, cz), radius = sphere[0], sphere[1]
        lx, ly, lz = ox - cx, oy - cy, oz - cz
        half_b = lx * dx + ly * dy + lz * dz
        c = lx * lx + ly * ly + lz * lz - radius * radius
        disc = half_b * half_b - c
        if disc < 0.0:
            continue
        root = math.sqrt(disc)
        t = -half_b - root
        if t <= EPSILON:
            t = -half_b + root
        if EPSILON < t < best:
            best, hit = t, sphere
    return best, hit


def sky(direction: tuple) -> tuple[float, float, float]:
    up = 0.5 * (direction[1] + 1.0)
    return (1.0 - 0.5 * up, 1.0 - 0.3 * up, 1.0)


def dot(a: tuple, b: tuple) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def normalise(v: tuple) -> tuple[float, float, float]:
    length = math.sqrt(dot(v, v))
    return (v[0] / length, v[1] / length, v[2] / length)


def integer_power(base: float, exponent: int) -> float:
    """base**exponent by squaring: libm's pow may differ by an ulp between machines."""
    result = 1.0
    while exponent:
        if exponent & 1:
            result *= base
        base *= base
        exponent >>= 1
    return result


def to_byte(value: float) -> int:
    if value <= 0.0:
        return 0
    if value >= 1.0:
        return 255
    return int(value * 255.0 + 0.5)


plugin = RayTracer()
